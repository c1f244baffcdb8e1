#!/bin/bash
# Interleaved: login-storm/12 (dram,tierd) base (4548564) vs change (a resting tenant cut priced once), 3 rounds.
cd /var/tmp/s53
for i in 1 2 3; do
  for b in base chg; do
    echo "$(date +%T) ls12 $b round $i"
    /var/tmp/s53/$b/tierd-bench run "login-storm/12 tenants" --modes dram,tierd --reps 1 --fresh --out /var/tmp/s53/ls12-$b-$i --logs /var/tmp/s53/ls12-$b-$i/logs > ls12-$b-$i.log 2>&1
    echo "$(date +%T) rc=$?"
  done
done
echo "$(date +%T) done"
