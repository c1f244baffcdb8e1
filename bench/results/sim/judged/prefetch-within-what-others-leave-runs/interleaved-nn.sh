#!/bin/bash
# As run: "change" is the base build (b6521b3), its runs saved here as real-noisy-neighbour-base-*.
# Interleaved: noisy-neighbour (dram,tierd) base (curve through the measured point, b6521b3) vs bound (a shared-limit prefetch bounded by what the others' hot sets leave), 3 rounds.
cd /var/tmp/s52
for i in 1 2 3; do
  for b in change bound; do
    echo "$(date +%T) nn $b round $i"
    /var/tmp/s52/$b/tierd-bench run noisy-neighbour --modes dram,tierd --reps 1 --fresh --out /var/tmp/s52/nn-real-$b-$i --logs /var/tmp/s52/nn-real-$b-$i/logs > nn-real-$b-$i.log 2>&1
    echo "$(date +%T) rc=$?"
  done
done
echo "$(date +%T) done"
