"""Kafka's config providers: file, env and dir placeholders."""

from __future__ import annotations

from pathlib import Path

from tabletopic.config.definition import Problem
from tabletopic.config.providers import Providers

DECLARED = {"config.providers": "file,env,dir",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider"}


def test_each_provider_resolves(tmp_path: Path) -> None:
    (tmp_path / "kafka.properties").write_text("sasl.password = from-file\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "pw").write_text("from-dir\n")
    problems: list[Problem] = []
    providers = Providers.from_worker(DECLARED, problems)
    providers._environ = {"KAFKA_PW": "from-env"}
    resolved = providers.resolve({
        "a": f"${{file:{tmp_path}/kafka.properties:sasl.password}}", "b": "${env:KAFKA_PW}",
        "c": f"pre-${{dir:{tmp_path}/secrets:pw}}-post", "d": "plain"}, problems)
    assert problems == []
    assert resolved == {"a": "from-file", "b": "from-env", "c": "pre-from-dir-post", "d": "plain"}


def test_what_cannot_be_resolved_is_a_problem_that_names_the_key(tmp_path: Path) -> None:
    problems: list[Problem] = []
    providers = Providers.from_worker(DECLARED, problems)
    providers._environ = {}
    providers.resolve({"a": "${env:MISSING}", "b": f"${{file:{tmp_path}/none:k}}", "c": "${vault:x:y}"}, problems)
    assert [p.key for p in problems] == ["a", "b", "c"]
    assert "MISSING is not set" in problems[0].message and "no config provider 'vault'" in problems[2].message


def test_an_unknown_provider_class_is_a_problem() -> None:
    problems: list[Problem] = []
    Providers.from_worker({"config.providers": "x", "config.providers.x.class": "com.example.Vault"}, problems)
    assert problems and problems[0].key == "config.providers.x.class"
