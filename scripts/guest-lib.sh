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

host_tools() { # what building and booting the guests takes on the host, installed if missing
  local need_apt=()
  command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
  command -v cpio >/dev/null 2>&1 || need_apt+=(cpio)
  # The fault guest's failing tier is a device-mapper table; dmsetup is copied into it.
  command -v dmsetup >/dev/null 2>&1 || need_apt+=(dmsetup)
  if ((${#need_apt[@]})); then
    echo "guest: installing ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
  fi
}
