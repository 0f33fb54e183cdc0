# Sourced by scripts/test-matrix and scripts/sanitizer-check.

# find_python VERSION: print the path of a CPython VERSION (pyenv first, then PATH).
find_python() {
    local v=$1 candidate
    for candidate in /root/.pyenv/versions/"$v".*/bin/python"$v" "$(command -v python"$v" 2>/dev/null)"; do
        if [[ -x "$candidate" ]]; then echo "$candidate"; return 0; fi
    done
    return 1
}

# ensure_venv PYTHON DIR: create a venv at DIR with PYTHON unless one is there.
ensure_venv() {
    local py=$1 venv=$2
    [[ -x "$venv/bin/python" ]] && return 0
    "$py" -m venv "$venv" || return 1
    "$venv/bin/python" -m pip install -q --upgrade pip setuptools wheel || true
}
