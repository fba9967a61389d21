"""The configuration model: the article's numbers as defaults, user overrides, and errors that say what to fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infersight.config import Config, ConfigError, dump_config, duration_seconds, load_config, parse_config

REPO = Path(__file__).resolve().parents[1]


def test_defaults_carry_the_articles_numbers() -> None:
    config = Config()
    tiers = [(t.name, t.max_prompt_tokens, t.latency_seconds) for t in config.slo.tiers]
    assert tiers == [("realtime", 2048, 2.0), ("normal", 32768, 5.0), ("batch", None, None)]  # batch is async
    slo, th = config.slo, config.thresholds
    assert (slo.percentile, slo.warning_factor, slo.critical_factor) == (0.99, 1.5, 2.0)
    assert duration_seconds(slo.critical_for) == 5 * 60
    assert slo.warmup_requests == 100
    assert th.kv_cache_usage == 0.8
    assert th.batch_efficiency == 0.85
    assert th.scheduling_cycle_seconds == 0.005
    assert th.gpu_util_stddev == 0.15
    assert (th.hbm_bandwidth.low, th.hbm_bandwidth.high) == (0.6, 0.8)
    assert th.domain_token_accuracy == 0.98
    assert th.compliance_pass_rate == 1.0
    assert (th.spec_decode_acceptance, th.spec_decode_failure) == (0.85, 0.05)
    assert config.exporter.listen_address == "127.0.0.1"  # loopback unless configured


def test_an_empty_file_means_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "infersight.yaml"
    path.write_text("# nothing changed\n")
    assert load_config(path) == Config()
    assert load_config(None) == Config()


def test_a_user_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "infersight.yaml"
    path.write_text(
        "thresholds:\n"
        "  kv_cache_usage: 0.7\n"
        "  hbm_bandwidth: {high: 0.9}\n"
        "vllm:\n"
        "  targets: [{name: gpu-a, url: 'http://10.0.0.5:8000/metrics'}]\n"
        "  max_num_batched_tokens: 8192\n"
    )
    config, default = load_config(path), Config()
    assert config.thresholds.kv_cache_usage == 0.7
    assert config.thresholds.hbm_bandwidth.high == 0.9
    assert config.thresholds.hbm_bandwidth.low == default.thresholds.hbm_bandwidth.low
    assert [(t.name, t.url) for t in config.vllm.targets] == [("gpu-a", "http://10.0.0.5:8000/metrics")]
    assert config.vllm.max_num_batched_tokens == 8192
    assert config.vllm.poll_interval_seconds == default.vllm.poll_interval_seconds
    assert config.thresholds.batch_efficiency == default.thresholds.batch_efficiency
    assert config.slo == default.slo


def test_the_dumped_defaults_load_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "full.yaml"
    path.write_text(dump_config(Config()))
    assert load_config(path) == Config()


def test_the_committed_infersight_yaml_is_the_defaults() -> None:
    assert load_config(REPO / "infersight.yaml") == Config()


@pytest.mark.parametrize(
    ("data", "path", "expected", "found"),
    [
        ({"thresholds": {"kv_cache_usage": 1.5}}, "thresholds.kv_cache_usage", "less than or equal to 1", "1.5"),
        ({"thresholds": {"kv_cache_usage": "high"}}, "thresholds.kv_cache_usage", "a valid number", "'high'"),
        ({"thresholds": {"kv_cache_for": "5 minutes"}}, "thresholds.kv_cache_for", "duration", "'5 minutes'"),
        ({"vllm": {"max_num_batched_tokens": 0}}, "vllm.max_num_batched_tokens", "greater than 0", "0"),
        ({"vllm": {"targets": "http://x"}}, "vllm.targets", "a valid list", "'http://x'"),
        ({"vllm": {"targets": [{"name": "x", "url": "ftp://x"}]}}, "vllm.targets[0].url", "^https?://", "'ftp://x'"),
        (
            {"vllm": {"targets": [{"name": "a", "url": "http://a"}, {"name": "a", "url": "http://b"}]}},
            "vllm.targets",
            "unique",
            "['a', 'a']",
        ),
        ({"exporter": {"port": 70000}}, "exporter.port", "less than or equal to 65535", "70000"),
        ({"vllm": {"poll_interval_seconds": 20}}, "vllm", "at least two polls", "poll_interval_seconds=20.0"),
        ({"exporter": {"collectors": {"vllm": "maybe"}}}, "exporter.collectors.vllm", "boolean", "'maybe'"),
        ({"slo": "fast"}, "slo", "dictionary", "'fast'"),
        ({"version": 2}, "version", "1", "2"),
        (
            {"slo": {"tiers": [{"name": "a", "max_prompt_tokens": 10, "latency_seconds": -2}]}},
            "slo.tiers[0].latency_seconds",
            "greater than 0",
            "-2",
        ),
        (
            {
                "slo": {
                    "tiers": [
                        {"name": "a", "max_prompt_tokens": 100, "latency_seconds": 1},
                        {"name": "b", "max_prompt_tokens": 50, "latency_seconds": 2},
                    ],
                    "model_latency_tier": "a",
                }
            },
            "slo",
            "increase",
            "[100, 50]",
        ),
        ({"slo": {"warning_factor": 3, "critical_factor": 2}}, "slo", "critical_factor must be >=", "3"),
        ({"thresholds": {"hbm_bandwidth": {"low": 0.9, "high": 0.8}}}, "thresholds.hbm_bandwidth", "below", "0.9"),
    ],
)
def test_every_bad_value_names_path_expectation_and_found_value(
    data: dict, path: str, expected: str, found: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(data, "user.yaml")
    [problem] = error.value.problems
    assert problem.startswith(f"{path}: ")
    assert expected in problem and found in problem.split(": ", 1)[1]
    assert str(error.value).startswith("user.yaml: invalid configuration")


def test_several_bad_fields_are_all_reported() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"thresholds": {"kv_cache_usage": 2, "batch_efficiency": -1}, "exporter": {"port": -1}})
    paths = sorted(p.split(":")[0] for p in error.value.problems)
    assert paths == ["exporter.port", "thresholds.batch_efficiency", "thresholds.kv_cache_usage"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"thresholds": {"kv_cache_usge": 0}},
            "thresholds.kv_cache_usge: unknown field; did you mean 'kv_cache_usage'?",
        ),
        (
            {"slo": {"tiers": [{"nme": "a", "latency_seconds": 1}]}},
            "slo.tiers[0].nme: unknown field; did you mean 'name'?",
        ),
        ({"vlm": {}}, "vlm: unknown field; did you mean 'vllm'?"),
        ({"exporter": {"zzz": 1}}, "exporter.zzz: unknown field"),
    ],
)
def test_unknown_keys_get_a_did_you_mean(data: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert problem in error.value.problems


@pytest.mark.parametrize(("text", "found"), [("- a\n- b\n", "list"), ("just text\n", "str"), ("42\n", "int")])
def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str, found: str) -> None:
    path = tmp_path / "infersight.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert error.value.problems == [f"(top level): expected a mapping, found {found}"]
    assert error.value.source == str(path)


def test_an_unreadable_file_is_reported_with_its_path(tmp_path: Path) -> None:
    for path, reason in ((tmp_path / "missing.yaml", "No such file"), (tmp_path, "Is a directory")):
        with pytest.raises(ConfigError) as error:
            load_config(path)
        assert str(error.value).startswith(f"{path}: invalid configuration")
        assert error.value.problems[0].startswith("cannot read file: ") and reason in error.value.problems[0]


def test_invalid_yaml_is_reported_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "infersight.yaml"
    path.write_text("thresholds:\n  kv_cache_usage: [0.8\n  batch_efficiency: 0.85\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    [problem] = error.value.problems
    assert problem.startswith("not valid YAML: ") and "line 3" in problem


def test_every_key_is_documented() -> None:
    """docs/configuration.md is generated from field docstrings: a new field must say what it means."""
    from infersight.docs import config_reference

    undocumented = [line.split("|")[1].strip() for line in config_reference().splitlines() if line.endswith("|  |")]
    assert undocumented == []


def test_the_readme_example_is_a_valid_config() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```yaml\n(# my-infersight.yaml\n.*?)```", readme, re.DOTALL)
    assert example is not None, "README lost its configuration example"
    config = parse_config(yaml.safe_load(example.group(1)), "README.md")
    assert config.slo.tier("realtime").latency_seconds == 1.5
