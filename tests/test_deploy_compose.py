"""``deploy/compose.yaml`` (written, not run here: no Docker on the build machines), read
as YAML: the live class's rooms go to one Redis that every app replica reaches, with a
health check the replicas wait for and persistence (AOF, fsync always, a volume); nginx
still waits for warm replicas. Skipped without PyYAML (not a dependency of the app)."""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "deploy" / "compose.yaml"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]


def _apps(services: dict) -> dict:
    return {n: s for n, s in services.items() if s.get("build", {}).get("dockerfile")}


def test_redis_is_a_healthy_service_that_keeps_its_rooms(services):
    redis = services["redis"]
    image, tag = redis["image"].split(":")
    assert image == "redis" and tag.endswith("bookworm")  # the official image, Debian-based
    cmd = redis["command"]
    assert cmd[0] == "redis-server"
    assert cmd[cmd.index("--appendonly") + 1] == "yes"  # a restart keeps every room
    assert cmd[cmd.index("--appendfsync") + 1] == "always"  # and every confirmed answer
    assert cmd[cmd.index("--maxmemory-policy") + 1] == "noeviction"  # never drops a room
    assert redis["volumes"] == ["redis-data:/data"]
    assert "redis-data" in yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["volumes"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "ports" not in redis  # reachable on the compose network only


def test_every_replica_uses_the_one_redis_and_waits_for_it(services):
    apps = _apps(services)
    assert sorted(apps) == ["app1", "app2"]
    for name, app in apps.items():
        env = app["environment"]
        assert env["SPECDEC_REDIS_URL"] == "redis://redis:6379/0", name
        assert "SPECDEC_ROOM_TTL_H" in env, name
        assert app["depends_on"]["redis"] == {"condition": "service_healthy"}, name
        # the same cookie secret everywhere (XSRF valid whichever replica answers)
        assert env["STREAMLIT_SERVER_COOKIE_SECRET"].startswith("${SPECDEC_COOKIE_SECRET")
    nginx = services["nginx"]
    assert nginx["depends_on"] == {a: {"condition": "service_healthy"} for a in apps}


def test_the_redis_url_setting_is_the_one_the_store_reads():
    """The compose file, the README and the store agree on the setting's name."""
    rooms = pytest.importorskip("specdec_core.server.rooms")
    source = Path(rooms.__file__).read_text(encoding="utf-8")
    for name in ("SPECDEC_REDIS_URL", "SPECDEC_ROOM_TTL_H", "SPECDEC_ROOM_DB"):
        assert name in source, name
        assert name in (REPO / "README.md").read_text(encoding="utf-8"), name
    assert "SPECDEC_REDIS_URL" in (REPO / "deploy" / "README.md").read_text(encoding="utf-8")
