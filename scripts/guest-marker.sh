# Sourced by guest-check.sh and guest-fault.sh: a tenant whose memory holds a known text,
# paged out to the tier, and a look for that text on the raw disk under the tier. On an
# encrypted tier it is not there; on a clear one it is.
MARKER=ZqTierdMarkerZq
plaintext_marker() { # starts tenant `marker` (4 MiB of the marker in a shell's memory) and demotes it
  tierctl --socket /run/tierd.sock run --name marker --size 8M -- \
    sh -c "x=\$(yes $MARKER | head -c 4194304); sleep 600; echo \${#x}"
  sleep 5
  tierctl --socket /run/tierd.sock demote marker > /dev/null
}
plaintext_on() { # DEVICE: how many lines of its first 256 MiB hold the marker (freed
  # swap slots keep what was written, so a look after the tenant is gone still counts)
  head -c 268435456 "$1" | grep -c -a -F "$MARKER"
}
