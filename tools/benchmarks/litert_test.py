"""`zoo benchmark litert`: its arithmetic from made-up figures, bad input, and the quick form (ci)."""

import json

import pytest

from zoo.tools.benchmarks import litert


def made_up_runs():
    """Two rounds: XLA at 100 then 50 tokens/s (a load came), LiteRT int8 at 400 then 150."""
    gen = {"litert-int8": [{"s": 0.25, "tokens": 100, "ids": [5, 6]}, {"s": 1 / 1.5, "tokens": 100, "ids": [5, 6]}],
           "litert-float32": [{"s": 0.5, "tokens": 100, "ids": [5, 6]}, {"s": 1.0, "tokens": 100, "ids": [5, 7]}],
           "xla": [{"s": 1.0, "tokens": 100, "ids": [5, 6]}, {"s": 2.0, "tokens": 100, "ids": [5, 6]}],
           "saved-model": [{"s": 2.0, "tokens": 100}, {"s": 4.0, "tokens": 100}]}
    score = {side: [{"s": 0.1, "tokens": 256, "sum": -700.0}] * 2 for side in ("litert-int8", "litert-float32", "xla")}
    return {"generate": gen, "score": score}


def test_rates_ratios_to_xla_and_bandwidth_shares_from_made_up_figures():
    info = {"weights_read": 10**7, "bytes": {"litert-int8": 11e6, "litert-float32": 40e6, "saved-model": 45e6},
            "parameters": 10**7, "ops": {}}
    out = litert.summarise(info, made_up_runs(), [{"gbs": 8.0}, {"gbs": 10.0}])
    rows = out["rows"]
    assert rows["litert-int8"]["tokens_s"] == pytest.approx(275.0)  # the median of 400 and 150
    assert rows["litert-int8"]["vs_xla"] == pytest.approx(3.5)  # the median of 4 and 3: each round against its own
    assert rows["litert-int8"]["bandwidth_share"] == pytest.approx(275 * 1e7 / 1e9 / 10.0)  # 1 byte a weight
    assert rows["xla"]["bandwidth_share"] == pytest.approx(75 * 4e7 / 1e9 / 10.0)  # 4 bytes, the better bandwidth
    assert rows["litert-float32"]["score_tokens_s"] == pytest.approx(2560.0)
    assert "score_tokens_s" not in rows["saved-model"] and rows["xla"]["bytes"] is None
    assert out["greedy_equal_float32_xla"] == 0.5  # the last round's ids: [5, 7] against [5, 6]


def test_the_table_has_one_row_a_side_and_the_int8_share_of_the_file():
    files = {"litert-int8": 10 * 2**20, "litert-float32": 40 * 2**20, "saved-model": 45 * 2**20}
    info = {"weights_read": 10**7, "bytes": files, "parameters": 10**7, "ops": {"litert-int8": {}}}
    results = {"command": "zoo benchmark litert", "cpu": "a CPU", "threads": 2,
               "presets": {"gcnn-ptb": litert.summarise(info, made_up_runs(), [{"gbs": 10.0}])}}
    lines = litert.table(results).splitlines()
    assert lines[5] == "| gcnn-ptb | litert-int8 | 275.0 | 3.50× | 10.0 | 28% | 2,560 | 10.0 |"
    assert lines[7] == "| gcnn-ptb | xla | 75.0 | 1.00× | 40.0 | 30% | 2,560 | - |"
    assert "int8 file 25.0% of float32's" in lines[-1]


@pytest.mark.parametrize("flag", ["--repeats", "--new-tokens", "--window", "--threads", "--buffer-mib"])
def test_a_count_below_one_is_one_sentence(flag, capsys):
    with pytest.raises(SystemExit):
        litert.main([flag, "0"])
    assert f"{flag} must be at least 1, got 0." in capsys.readouterr().err


def test_a_negative_min_seconds_is_one_sentence(capsys):
    with pytest.raises(SystemExit):
        litert.main(["--min-seconds", "-1"])
    assert "--min-seconds must be 0 or more, got -1.0." in capsys.readouterr().err


@pytest.mark.ci
def test_the_quick_form_measures_every_side_and_litert_float32_scores_as_xla(tmp_path):
    path = tmp_path / "litert.json"
    litert.main(["--small", "--repeats", "2", "--new-tokens", "8", "--window", "16", "--buffer-mib", "64",
                 "--min-seconds", "0.05", "--json", str(path)])
    run = json.loads(path.read_text())["presets"]["gcnn-ptb"]
    assert set(run["rows"]) == set(litert.SIDES)
    assert all(row["tokens_s"] > 0 for row in run["rows"].values())
    made = [a["tokens"] for a in run["runs"]["generate"]["litert-int8"]]
    assert all(n % 8 == 0 for n in made) and max(made) > 8  # 8 tokens a call, calls repeated for 0.05 s
    assert run["score_difference_float32_xla"] < 1e-3  # a window's summed log-probability, float32 against XLA
    assert run["rows"]["litert-int8"]["bytes"] < run["rows"]["litert-float32"]["bytes"]
    assert run["read_gbs"] > 0 and "FULLY_CONNECTED" in run["ops"]["litert-int8"]


def test_perfs_symbols_lose_their_padding_columns_and_template_arguments():
    assert litert.symbol("xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x64c4__asm_amd64_avx512vnni      -      - ") == \
        "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x64c4__asm_amd64_avx512vnni"
    assert litert.symbol("Eigen::redux_impl<Eigen::sum_op<float, float>, E<a> >::run<E<b> >  -  - ") == "Eigen::redux_impl::run"
