# How reliability-segv-trace.txt was made: perf on the kernel's signal_generate tracepoint
# (SIGSEGV only, with kernel stacks) around 8 runs of reliability-segv-repro.sh. tracefs is
# mounted in a private mount namespace: run as `unshare -m bash bench/results/reliability-segv-trace.sh`.
set -u
mount -t tracefs nodev /sys/kernel/tracing
perf record -q -o /var/tmp/perf-sig.data -e signal:signal_generate --filter "sig==11" -g -a &
P=$!
for i in 1 2 3 4 5 6 7 8; do
  bash bench/results/reliability-segv-repro.sh > /var/tmp/segv-run-$i.log 2>&1
  echo "run $i: summaries $(grep -c summary /var/tmp/segv-run-$i.log)"
done
kill -INT $P; wait $P
perf script -i /var/tmp/perf-sig.data
