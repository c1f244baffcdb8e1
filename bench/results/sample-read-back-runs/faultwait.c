// What a short block (a page fault's read, ~60 us) costs a CPU-bound thread on a host
// whose CPUs are shared: the thread's CPU time per wall second, blocking `rate` times a
// second for `block_us`, against the same thread never blocking, with `spinners`
// CPU-bound neighbours. Usage: faultwait SPINNERS RATE BLOCK_US SECS
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static double now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: faultwait SPINNERS RATE BLOCK_US SECS\n"); return 2; }
    int spinners = atoi(argv[1]); double rate = atof(argv[2]); long block_us = atol(argv[3]); double secs = atof(argv[4]);
    pid_t kids[64];
    for (int i = 0; i < spinners; i++) {
        kids[i] = fork();
        if (kids[i] == 0) { volatile unsigned long x = 0; for (;;) x++; }
    }
    usleep(200000);
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
    double next = w0, gap = rate > 0 ? 1.0 / rate : 1e9;
    long blocks = 0; volatile unsigned long x = 0;
    struct timespec ts = { 0, block_us * 1000 };
    for (;;) {
        for (int i = 0; i < 2000; i++) x++;
        double w = now(CLOCK_MONOTONIC);
        if (w - w0 >= secs) break;
        if (w >= next) { nanosleep(&ts, NULL); blocks++; next += gap; }
    }
    double wall = now(CLOCK_MONOTONIC) - w0, cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
    for (int i = 0; i < spinners; i++) kill(kids[i], SIGKILL);
    for (int i = 0; i < spinners; i++) waitpid(kids[i], NULL, 0);
    printf("spinners %d rate %.0f block_us %ld blocks %ld wall %.3f cpu %.3f share %.4f\n", spinners, rate, block_us, blocks, wall, cpu, cpu / wall);
    return 0;
}
