"""Core imports and runs plan mode without cloud SDKs, provider SDKs or desktop drivers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.core.batch_configs import pool_config, write

BLOCKED = ["boto3", "botocore", "openai", "anthropic", "pyautogui", "mss", "PIL", "ezdxf", "moto"]

SITECUSTOMIZE = f'''
import sys

class _Blocker:
    blocked = {BLOCKED!r}

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ImportError(f"{{name}} is blocked in this test")
        return None

sys.meta_path.insert(0, _Blocker())
'''

PROBE = """
import json, sys, runpy
sys.argv = ["autocad-bench-batch"] + sys.argv[1:]
try:
    from autocad_bench.cli.batch import main
    main()
except SystemExit as exit:
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in %r)
    print(json.dumps({"loaded": loaded}), file=sys.stderr)
    raise
""".replace("%r", repr(BLOCKED))


def test_plan_mode_without_heavy_dependencies(tmp_path: Path, health_server: tuple[str, str]) -> None:
    url, token = health_server
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    config = write(tmp_path, pool_config([url], tmp_path / "leases"))
    env = {**os.environ, "PYTHONPATH": str(site), "EXAMPLE_POOL_TOKEN": token}
    blocked = subprocess.run([sys.executable, "-c", "import boto3"], env=env, capture_output=True, text=True)
    assert "blocked in this test" in blocked.stderr, "the import blocker is not active"
    result = subprocess.run([sys.executable, "-c", PROBE, "--config", str(config)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["passed"] is True
    assert json.loads(result.stderr.strip().splitlines()[-1]) == {"loaded": []}
