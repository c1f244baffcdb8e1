#!/bin/bash
# faultwait over neighbours × block rate, 3 rounds interleaved; block 60 us (the tier's read).
for rep in 1 2 3; do for s in 0 1 2 3 5; do for r in 0 20 100 500; do ./faultwait $s $r 60 4; done; done; done
