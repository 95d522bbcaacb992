#!/usr/bin/env bash
# Compiles every kembed translation unit that uses Kokkos against Kokkos 5.2.2's
# headers, from Debian's newer suite's libkokkos-dev (unpacked into the cache, never
# installed): an OpenMP-only Kokkos with no Serial, built as C++20, so API drift and
# any assumption of a backend show up in CI. Syntax only (templates are instantiated,
# no code is generated): its libraries need a newer glibc than Debian 12's, so nothing
# is linked, and code generation took 40% of the step's time.
#
#   scripts/check-kokkos5.sh        # prints "kokkos5: N of N translation units compiled"
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$here/scripts/lib/debian-archive.sh"
cache=${KEMBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kembed}
root=$cache/kokkos-5.2.2-headers
log() { echo "kokkos5: $*" >&2; }

if [[ ! -f $root/.kembed-complete ]]; then
  work=$cache/kokkos5-download
  conf=$(private_apt "$work/apt" deb "sid main")
  rm -rf "$work/debs" "$root" && mkdir -p "$work/debs"
  log "downloading libkokkos-dev from Debian's sid (0.6 MB)"
  (cd "$work/debs" && APT_CONFIG=$conf apt-get download -q libkokkos-dev >/dev/null)
  dpkg-deb -x "$work"/debs/libkokkos-dev_*.deb "$root"
  rm -rf "$work"
  # The package's CMake files check that every library they name exists; those
  # live in other packages (or none): empty stand-ins let it configure.
  lib=$root/usr/lib/x86_64-linux-gnu
  for f in $(sed -n 's|.*"${_IMPORT_PREFIX}/\(lib/[^"]*\)".*|\1|p' "$lib"/cmake/Kokkos/KokkosTargets-*.cmake | sort -u); do
    [[ -e $root/usr/$f ]] || touch "$root/usr/$f"
  done
  # It names its headers by their installed, absolute path: point that into the unpack.
  sed -i 's|"/usr/include/|"${_IMPORT_PREFIX}/include/|g' "$lib"/cmake/Kokkos/KokkosTargets.cmake
  touch "$root/.kembed-complete"
fi
version=$(sed -n 's/.*PACKAGE_VERSION "\([0-9.]*\)".*/\1/p' "$root"/usr/lib/x86_64-linux-gnu/cmake/Kokkos/KokkosConfigVersion.cmake)

build=$here/build/kokkos5
# The Python module's Kokkos translation units too, where the venv has nanobind (scripts/setup.sh python).
python_flags=()
venv_python=$cache/venv/bin/python
if "$venv_python" -c "import nanobind" 2>/dev/null; then
  python_flags=(-DKEMBED_ENABLE_PYTHON=ON -DPython_EXECUTABLE="$venv_python")
else
  log "no nanobind in $cache/venv: the Python module is not checked (scripts/setup.sh python)"
fi
log "configuring against Kokkos ${version:-?} (C++20, syntax only: whether it compiles is what matters)"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_STANDARD=20 \
  -DKokkos_ROOT="$root/usr/lib/x86_64-linux-gnu/cmake/Kokkos" -DKEMBED_REQUIRED_DEVICES=OPENMP \
  -DKEMBED_ENABLE_INSPECTOR=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${python_flags[@]}" >"$build.configure.log" 2>&1 ||
  { tail -n 30 "$build.configure.log" >&2; exit 1; }
# Every compile command of a file that includes Kokkos (directly or through kembed).
failed=0
python3 - "$build/compile_commands.json" "$(nproc)" <<'PY' || failed=1
import concurrent.futures, json, os, shlex, subprocess, sys
entries = [e for e in json.load(open(sys.argv[1])) if "/kokkos-5.2.2-headers/" in e["command"]]
def compile(e):
    args = shlex.split(e["command"])
    os.makedirs(os.path.dirname(os.path.join(e["directory"], args[args.index("-o") + 1])), exist_ok=True)
    # Syntax only: GCC still instantiates every template a translation unit uses (the
    # API drift this looks for); code generation, which nothing here links, is skipped.
    r = subprocess.run(e["command"] + " -fsyntax-only", shell=True, cwd=e["directory"], capture_output=True, text=True)
    return e["file"], r.returncode, r.stderr
bad = 0
with concurrent.futures.ThreadPoolExecutor(int(sys.argv[2])) as pool:
    for f, rc, err in pool.map(compile, entries):
        if rc != 0:
            bad += 1
            print(f"kokkos5: FAILED {f}\n{err[-4000:]}", file=sys.stderr)
print(f"kokkos5: {len(entries) - bad} of {len(entries)} translation units compiled")
sys.exit(1 if bad else 0)
PY
exit $failed
