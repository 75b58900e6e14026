"""The machine fingerprint's cache size and what the bench says about the memory floor with it."""
from dspark_viz.evaluation.machine_info import last_level_cache_bytes
from dspark_viz.evaluation.speed_report import floor_lines


def _cache(root, level: int, size: str, index: int) -> None:
    d = root / f"index{index}"
    d.mkdir()
    (d / "level").write_text(f"{level}\n")
    (d / "size").write_text(f"{size}\n")


def test_the_last_level_cache_is_the_highest_level_listed(tmp_path):
    _cache(tmp_path, 1, "48K", 0)
    _cache(tmp_path, 1, "32K", 1)
    _cache(tmp_path, 2, "2048K", 2)
    _cache(tmp_path, 3, "491520K", 3)
    assert last_level_cache_bytes(str(tmp_path)) == 491520 * 1024
    (tmp_path / "index4").mkdir()                             # unreadable entries are skipped, not fatal
    (tmp_path / "index4" / "level").write_text("four")
    assert last_level_cache_bytes(str(tmp_path)) == 491520 * 1024


def test_no_cache_folder_says_none(tmp_path):
    assert last_level_cache_bytes(str(tmp_path / "absent")) is None
    assert last_level_cache_bytes(str(tmp_path)) is None


class _Rep:
    def __init__(self, fits: bool):
        self.memory_floor = {"read_GBps": 25.0, "llc_MB": 503.3, "by_dtype": {"bf16": dict(
            weight_MB=269.0, floor_ms_per_token=10.8, plain_ms_per_token=10.2, plain_over_floor=10.2 / 10.8,
            fits_llc=fits)}}


def test_the_floor_line_says_when_the_weights_fit_the_cache():
    fits, not_fits = floor_lines(_Rep(True))[0], floor_lines(_Rep(False))[0]
    assert "0.94× the floor" in fits and "fit this CPU's 503 MB last-level cache" in fits
    assert "last-level cache" not in not_fits and "0.94× the floor" in not_fits
    assert "bandwidth, one buffer (0.94×" in fits                 # a run from before the median says so
    rep = _Rep(False)
    rep.memory_floor["read_buffers"] = 5
    assert "25.0 GB/s read bandwidth, median of 5 buffers (0.94×" in floor_lines(rep)[0]


def test_read_bandwidth_takes_the_median_over_separate_buffers(monkeypatch):
    import pytest

    from dspark_viz.evaluation import machine_info

    with pytest.raises(ValueError, match="buffer"):
        machine_info.read_bandwidth(buffers=0)
    with pytest.raises(ValueError, match="GiB"):
        machine_info.read_bandwidth(gib=0.5)
    seconds = iter([1.0, 1.0, 4.0, 4.0, 2.0, 2.0])      # per buffer: a warm-up read and one timed read
    clock = {"t": 0.0}

    def fake_clock():
        return clock["t"]

    class FakeBuffer:                                   # stands in for the 1 GiB tensor: each sum "takes" a time
        def __init__(self, n, dtype):
            self.n = n

        def sum(self):
            clock["t"] += next(seconds)

        def numel(self):
            return self.n

        def element_size(self):
            return 4

    monkeypatch.setattr(machine_info.time, "perf_counter", fake_clock)
    monkeypatch.setattr(machine_info.torch, "ones", lambda n, dtype: FakeBuffer(n, dtype))
    bw = machine_info.read_bandwidth(repeats=1, buffers=3)
    assert bw == pytest.approx(2 ** 30 / 2.0)           # buffers at 1, 4 and 2 s: the median, not the best


def test_the_floor_line_pairs_each_plain_decode_with_its_own_read():
    rep = _Rep(False)
    rep.memory_floor["by_dtype"]["bf16"].update(read_samples_GBps=[30.0, 60.0, 40.0], floor_ms_per_token=269.0 / 40,
                                                plain_over_floor=1.25)
    line = floor_lines(rep)[0]
    assert "÷ 40.0 GB/s read bandwidth, the median of 3 reads each taken just before a plain decode" in line
    assert "(range 30.0–60.0 GB/s; 25.0 at the start)" in line and "(1.25× the floor, the median of each" in line


def test_read_probe_keeps_one_buffer_and_reads_it_on_call():
    import pytest

    from dspark_viz.evaluation.machine_info import ReadProbe

    with pytest.raises(ValueError, match="GiB"):
        ReadProbe(gib=0.5)
    probe = ReadProbe()
    assert probe.buf.numel() * 4 == 2 ** 30
    assert probe(repeats=1) > 1e8                                    # bytes/s: any machine reads 0.1 GB/s
    with pytest.raises(ValueError, match="read"):
        probe(repeats=0)


def test_the_fingerprint_names_the_openmp_spin(monkeypatch):
    """A bench run records the OpenMP spin its process chose (a short one slows 2-thread decoding)."""
    from dspark_viz.evaluation.machine_info import machine_info

    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    info = machine_info()
    assert info["omp_spincount"] == "1000" and info["torch_threads"] >= 1
