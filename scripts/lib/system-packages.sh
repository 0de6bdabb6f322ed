# Sourced by the scripts in scripts/: install missing Debian packages, then make sure uv exists.
# usage: ensure_system_packages "what needs them" PACKAGE=COMMAND ...
# Installs with apt-get as root, with passwordless sudo otherwise; else names the command to run.

ensure_system_packages() {
  local purpose="$1"; shift
  local need=() pair package command
  for pair in "$@"; do
    package="${pair%%=*}"; command="${pair#*=}"
    command -v "$command" >/dev/null 2>&1 || need+=("$package")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need[*]} with sudo apt-get" >&2
    sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "error: $purpose needs the system packages ${need[*]}; install them with:" >&2
    echo "  sudo apt-get install -y ${need[*]}" >&2
    return 1
  fi
}

ensure_uv() {
  command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet uv
  # The workspace runs on the system Python 3.11; uv must never download an interpreter.
  export UV_PYTHON_DOWNLOADS=never UV_PYTHON_PREFERENCE=only-system
}
