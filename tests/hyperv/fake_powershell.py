"""A stand-in ``powershell.exe``: forwards its argv and secret variables to a fake Hyper-V host.

Usage (the tests write a small shell script around it as the ``powershell`` setting)::

    python fake_powershell.py HOST_URL -NoLogo ... -EncodedCommand BASE64

It prints what the host answered on stdout/stderr and exits with its exit code, exactly as a
real ``powershell.exe`` would for the script. Standard library only, so it starts fast.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def main() -> int:
    url, args = sys.argv[1], sys.argv[2:]
    secrets = {k: v for k, v in os.environ.items() if k.startswith("AUTOCAD_BENCH_PS_SECRET_")}
    body = json.dumps({"argv": args, "env": secrets}).encode()
    request = urllib.request.Request(url + "/run", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.loads(response.read())
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    return int(answer["code"])


if __name__ == "__main__":
    sys.exit(main())
