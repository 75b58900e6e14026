"""``python -m dspark_viz.cli …`` runs the command line as ``dspark-viz …`` does."""
import sys

from . import main

sys.exit(main())
