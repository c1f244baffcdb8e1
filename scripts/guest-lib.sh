# Sourced by guest.sh and guest-host.sh: the guests' Debian packages are downloaded and
# unpacked, never installed on the host.
fetch() { # DIR PACKAGE -> unpacked under DIR/PACKAGE, once
  local dir=$1 pkg=$2
  [ -d "$dir/$pkg" ] && return
  mkdir -p "$dir"
  (cd "$dir" && rm -f "${pkg}"_*.deb && { apt-get download -qq "$pkg" 2>/dev/null || { apt-get update -qq && apt-get download -qq "$pkg"; }; })
  dpkg-deb -x "$dir/${pkg}"_*.deb "$dir/$pkg"
  rm -f "$dir/${pkg}"_*.deb
}
