#!/bin/bash
# Interleaved: login-storm/12 (dram,tierd) main vs part1, 3 rounds; then the noisy policy test alternating.
cd /var/tmp/s51
for i in 1 2 3; do
  for b in main part1; do
    echo "$(date +%T) ls12 $b round $i"
    /var/tmp/s51/$b/tierd-bench run "login-storm/12 tenants" --modes dram,tierd --reps 1 --fresh --out /var/tmp/s51/ls12-$b-$i --logs /var/tmp/s51/ls12-$b-$i/logs > ls12-$b-$i.log 2>&1
    echo "$(date +%T) rc=$?"
  done
done
for i in 1 2 3 4 5 6 7 8; do
  for b in main part1; do
    if [ $b = main ]; then bin=/work/main/target/release/deps/policy-77979820792368b3; else bin=/var/tmp/s51/t-part1/release/deps/policy-77979820792368b3; fi
    echo "$(date +%T) noisy $b run $i"
    $bin --exact a_noisy_tenant_leaves_the_others_hot_sets_resident --test-threads 1 > noisy-$b-$i.log 2>&1
    echo "$(date +%T) noisy $b run $i rc=$?"
  done
done
echo "$(date +%T) done"
