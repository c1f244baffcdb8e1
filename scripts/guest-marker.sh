# Sourced by guest-check.sh and guest-fault.sh: a tenant whose memory holds a known text,
# paged out to the tier, and a look for that text on the raw disk under the tier. On an
# encrypted tier it is not there; on a clear one it is.
MARKER=ZqTierdMarkerZq
plaintext_marker() { # starts tenant `marker` (4 MiB of the marker in a shell's memory) and demotes it
  tierctl --socket /run/tierd.sock run --name marker --size 8M -- \
    sh -c "x=\$(yes $MARKER | head -c 4194304); sleep 600; echo \${#x}"
  # Demoted once the shell holds its text (its `sleep 600` runs): in a starved guest the
  # read took longer than a fixed 5 s wait, and the text stayed in DRAM.
  for _ in $(seq 120); do
    for p in /proc/[0-9]*; do
      [ "$(tr '\0' ' ' < "$p/cmdline" 2> /dev/null)" = "sleep 600 " ] && break 2
    done
    sleep 1
  done
  tierctl --socket /run/tierd.sock demote marker > /dev/null
}
plaintext_on() { # DEVICE: how many lines of its first 256 MiB hold the marker (freed
  # swap slots keep what was written, so a look after the tenant is gone still counts)
  head -c 268435456 "$1" | grep -c -a -F "$MARKER"
}
