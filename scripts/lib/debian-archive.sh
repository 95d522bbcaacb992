# Sourced by the scripts that fetch from Debian: the archive's address always comes
# from the system's own apt sources, and components or suites the system does not
# enable (non-free, sid) go through a private apt configuration, so the system's
# sources stay as they are.

# The archive URI the system uses for its own release's main component.
debian_archive_uri() {
  local codename uri
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 2>/dev/null |
    awk -v c="$codename" '$2 == c && $3 == "deb" { print $1; exit }')
  if [[ -z $uri ]]; then
    echo "no apt source for Debian $codename main is configured (see /etc/apt/sources.list.d); run apt-get update?" >&2
    return 1
  fi
  echo "${uri%/}"
}

# private_apt DIR TYPE "SUITE COMPONENT...": an apt configuration under DIR reading
# only that suite and component (TYPE deb or deb-src) of the system's archive;
# prints the file to pass as APT_CONFIG.
private_apt() {
  local dir=$1 type=$2 entry=$3 uri
  uri=$(debian_archive_uri) || return 1
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts.d"
  echo "$type [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $entry" >"$dir/sources.list"
  cat >"$dir/apt.conf" <<CONF
Dir::Etc::SourceList "$dir/sources.list";
Dir::Etc::SourceParts "$dir/parts.d";
Dir::State::Lists "$dir/lists";
Dir::Cache "$dir/cache";
Dir::State::status "$dir/status";
APT::Sandbox::User "root";
CONF
  : >"$dir/status"
  APT_CONFIG=$dir/apt.conf apt-get update -qq >&2 || return 1
  echo "$dir/apt.conf"
}
