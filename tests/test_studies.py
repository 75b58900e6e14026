"""The scaling studies' reader and charts on hand-made cells: selection per study, curves, markdown, charts."""
import json

from dspark_viz import viz
from dspark_viz.evaluation import study_report as sr


def _cell(algo, layers, gamma, max_seqs=900, steps=300, tau=1.5):
    return dict(name=f"{algo}_L{layers}_g{gamma}_n{max_seqs}_s{steps}", algo=algo, layers=layers, gamma=gamma,
                max_seqs=max_seqs, steps=steps, tau=tau, conditional_acceptance=[0.4, 0.3],
                val_curve=[dict(step=50, tau_est=1.2, acc1=0.3), dict(step=100, tau_est=1.3, acc1=0.35)],
                train=dict(data_tokens=max_seqs * 150, minutes=5.0), n_prompts=24, temperature=1.0,
                max_new_tokens=64)


def _write(tmp_path, cells, latency=None):
    for c in cells:
        (tmp_path / f"{c['name']}.json").write_text(json.dumps(c))
    if latency:
        (tmp_path / "latency.json").write_text(json.dumps(latency))
    return sr.load_cells(tmp_path)


def test_study_selection(tmp_path):
    cells = _write(tmp_path, [_cell("dspark", L, 7, tau=1.4 + 0.1 * L) for L in (1, 2, 3)]
                   + [_cell("dflash", 1, 7), _cell("dspark", 1, 3), _cell("dspark-rnn", 1, 11),
                      _cell("dspark", 1, 7, max_seqs=3600, tau=1.7)])
    depth = sr.study_frame(cells, "depth")
    assert sorted(zip(depth.algo, depth.layers)) == [("dflash", 1), ("dspark", 1), ("dspark", 2), ("dspark", 3)]
    assert set(depth.max_seqs) == {900}                     # one corpus size per depth/γ study
    gamma = sr.study_frame(cells, "gamma")
    assert set(gamma.gamma) == {3, 7, 11} and set(gamma.layers) == {1}
    data = sr.study_frame(cells, "data")
    assert list(data.max_seqs) == [900, 3600] and list(data.tau) == [1.5, 1.7]
    assert sr.cells_frame(cells).acc1.iloc[0] == 0.4
    longer = _write(tmp_path, [_cell("dspark", 1, 7, max_seqs=n, steps=2000, tau=1.6) for n in (900, 3600, 12000)])
    data = sr.study_frame(longer, "data")                   # the budget that covers the most corpus sizes
    assert list(data.max_seqs) == [900, 3600, 12000] and set(data.steps) == {2000}
    assert set(sr.study_frame(longer, "depth").steps) == {300}                     # the most common budget
    cur = sr.curves_frame(cells)
    assert len(cur) == 2 * len(cells) and set(cur.step) == {50, 100}


def test_recipe_variants_only_in_the_ablation(tmp_path):
    detached = dict(_cell("dspark", 1, 7, tau=1.35), name="dspark_L1_g7_n900_s300_cdetach",
                    variant=dict(conf_grad=False))
    cells = _write(tmp_path, [_cell("dspark", 1, 7), _cell("dflash", 1, 7), _cell("dspark", 2, 7), detached])
    assert "cdetach" not in " ".join(sr.study_frame(cells, "depth").name)      # a variant is not a depth point
    ab = sr.study_frame(cells, "ablation")
    assert list(zip(ab.algo, ab.variant)) == [("dflash", ""), ("dspark", ""), ("dspark", "conf_grad=False")]
    assert ab.label.iloc[2] == "DSpark-Markov (confidence loss into its head only)"
    assert "## Ablation" in sr.studies_markdown(tmp_path)
    assert sr.study_frame([c for c in cells if "variant" not in c], "ablation").empty   # no variant cell yet


def test_markdown_and_charts(tmp_path):
    lat = dict(path="torch stock (DSPARK_SKINNY=0)", dtype="fp32", machine="test CPU",
               rows=[dict(name="x", algo="dspark", gamma=g, t_draft=0.005, t_verify_full=0.02 + g * 1e-3,
                          t_plain=0.03) for g in (3, 7)])
    cells = _write(tmp_path, [_cell("dspark", L, 7) for L in (1, 2)] + [_cell("dflash", 1, 3)], lat)
    md = sr.studies_markdown(tmp_path)
    assert "## Depth" in md and "## Block size" in md and "## Latency per γ" in md
    assert "| DSpark-Markov | 2 | 7 |" in md and "τ_est by step" in md
    assert "No cells yet" in sr.studies_markdown(tmp_path / "none")
    for ch in (viz.depth_chart(sr.study_frame(cells, "depth")),
               viz.gamma_chart(sr.study_frame(cells, "gamma"), sr.load_latency(tmp_path)),
               viz.gamma_chart(sr.study_frame(cells, "gamma")),
               viz.data_chart(sr.study_frame(cells, "data")),
               viz.study_curves_chart(sr.curves_frame(cells))):
        assert ch.to_dict()["$schema"].startswith("https://vega.github.io")
