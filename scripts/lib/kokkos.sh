# Sourced by scripts/build-kokkos-*.sh: Kokkos 3.4.1 from Debian's own trilinos
# source package (bookworm's trilinos 13.2), unpacked once into the cache, and a
# helper that configures, builds and installs it with the caller's backends.
source "$(dirname "${BASH_SOURCE[0]}")/debian-archive.sh"

kembed_cache=${KEMBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kembed}

# Prints the folder holding packages/kokkos of the trilinos source.
kokkos_source() {
  local src=$kembed_cache/src conf
  mkdir -p "$src"
  if [[ ! -d $src/kokkos ]]; then
    if ! ls "$src"/trilinos_*.orig.tar.* >/dev/null 2>&1; then
      command -v dpkg-source >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev >/dev/null
      echo "kokkos: downloading Debian's trilinos source package (166 MB)" >&2
      conf=$(private_apt "$kembed_cache/apt-src" deb-src "$(. /etc/os-release && echo "$VERSION_CODENAME") main") || return 1
      # root downloads straight into the cache; apt's _apt sandbox user cannot write there
      (cd "$src" && APT_CONFIG=$conf apt-get source --download-only trilinos >/dev/null) || return 1
    fi
    local tarball
    tarball=$(ls "$src"/trilinos_*.orig.tar.* | head -n 1)
    echo "kokkos: unpacking packages/kokkos from $tarball" >&2
    rm -rf "$src/unpack" && mkdir "$src/unpack"
    tar -xf "$tarball" -C "$src/unpack" --wildcards '*/packages/kokkos/*' || return 1
    mv "$src"/unpack/*/packages/kokkos "$src/kokkos"
    rm -rf "$src/unpack"
  fi
  echo "$src/kokkos"
}

# build_kokkos PREFIX WHAT CMAKE-ARGS...: configures, builds and installs Kokkos
# into PREFIX (WHAT names it in messages); a stamp marks a finished install.
build_kokkos() {
  local prefix=$1 what=$2 src build log
  shift 2
  src=$(kokkos_source) || return 1
  build=$kembed_cache/build-$(basename "$prefix")
  log=$build.log
  echo "kokkos: configuring Kokkos 3.4.1 with $what (log: $log)" >&2
  rm -rf "$build" "$prefix"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF \
    -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF "$@" >"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; return 1; }
  echo "kokkos: building" >&2
  cmake --build "$build" -j"$(nproc)" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; return 1; }
  cmake --install "$build" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; return 1; }
  rm -rf "$build"
  touch "$prefix/.kembed-complete"
}
