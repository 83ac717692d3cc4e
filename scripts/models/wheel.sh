# Shared by the fetch scripts (sourced, not run): downloading a pinned PyPI
# wheel with pip and checking it. The caller defines `log`.

sha256_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# download_wheel PACKAGE VERSION SHA256 DIR [pip args...]: downloads the
# wheel PACKAGE==VERSION (without its dependencies) into DIR, checks its
# sha256 and prints its path. pip is the ordinary client for PyPI; the
# interpreter's module form is preferred so that the pip of the active
# Python is used.
download_wheel() {
    local package="$1" version="$2" want="$3" dir="$4"
    shift 4
    local pip_cmd
    if command -v python3 >/dev/null 2>&1; then
        pip_cmd=(python3 -m pip)
    elif command -v pip >/dev/null 2>&1; then
        pip_cmd=(pip)
    else
        log "neither python3 nor pip is available; install Python 3 with pip first"
        return 1
    fi
    "${pip_cmd[@]}" download "${package}==${version}" --no-deps --only-binary=:all: "$@" \
        -d "${dir}" --quiet --disable-pip-version-check >&2
    local wheels
    shopt -s nullglob
    wheels=("${dir}/${package//-/_}-${version}"-*.whl)
    shopt -u nullglob
    if [[ ${#wheels[@]} -ne 1 ]]; then
        log "expected exactly one ${package} wheel in ${dir}, found ${#wheels[@]}"
        return 1
    fi
    local got
    got="$(sha256_of "${wheels[0]}")"
    if [[ "${got}" != "${want}" ]]; then
        log "wheel sha256 mismatch: expected ${want}, got ${got}"
        return 1
    fi
    echo "${wheels[0]}"
}
