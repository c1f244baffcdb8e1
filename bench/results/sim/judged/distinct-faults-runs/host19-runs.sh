#!/bin/bash
# Interleaved: random-hosts/host-19 (dram,tierd) base (949d4cd) vs change, after the login-storm rounds.
cd /var/tmp/s54
while ! grep -q done interleaved.log; do sleep 5; done
for i in 1 2 3; do
  for b in base change; do
    echo "$(date +%T) host19 $b round $i"
    /var/tmp/s54/$b/tierd-bench run random-hosts/host-19 --modes dram,tierd --reps 1 --fresh --out /var/tmp/s54/h19-$b-$i --logs /var/tmp/s54/h19-$b-$i/logs > h19-$b-$i.log 2>&1
    echo "$(date +%T) rc=$?"
  done
done
echo "$(date +%T) done"
