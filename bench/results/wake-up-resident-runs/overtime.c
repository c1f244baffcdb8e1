// Random-access cost over 1 GiB, second by second for a minute, of memory that was
// (a) allocated in order once, (b) freed long enough for the guest to report it to
// the host and then allocated again, a page here and there (as swap-in does).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/mman.h>
#include <time.h>
#define GIB (1UL<<30)
#define PG 4096UL
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static uint64_t x=88172645463325252ULL;
static inline uint64_t rnd(){x^=x<<13;x^=x>>7;x^=x<<17;return x;}
// Dependent loads (a pointer chase through random pages), ns per access over `secs`.
static double chase(uint64_t*m,size_t words,double secs){
  double t0=now(); long n=0; uint64_t i=0;
  while(now()-t0<secs){ for(int k=0;k<100000;k++){ i=m[i]; } n+=100000; }
  if(i==1234567)puts("");
  return (now()-t0)/n*1e9;
}
static void ring(uint64_t*m,size_t words){
  // A random cycle over one word per page.
  size_t pages=words/(PG/8); size_t*o=malloc(pages*sizeof(size_t));
  for(size_t p=0;p<pages;p++)o[p]=p;
  for(size_t p=pages-1;p>0;p--){size_t j=rnd()%(p+1);size_t t=o[p];o[p]=o[j];o[j]=t;}
  for(size_t p=0;p<pages;p++) m[o[p]*(PG/8)]=o[(p+1)%pages]*(PG/8);
  free(o);
}
static void series(const char*what,uint64_t*m){
  ring(m,GIB/8);
  for(int s=0;s<60;s+=5) printf("%s t=%2d s: %.0f ns/access\n",what,s,chase(m,GIB/8,5.0)),fflush(stdout);
}
static char* fresh(size_t n){char*p=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);madvise(p,n,MADV_NOHUGEPAGE);for(size_t i=0;i<n;i+=PG)p[i]=1;return p;}
int main(int c,char**v){
  char*a=fresh(GIB);
  series("in order, kept",(void*)a);
  munmap(a,GIB);
  // Hold 4 GiB, give back 3 of each 4 2-MiB blocks (whole blocks: the guest reports
  // them to the host), wait, then touch 1 GiB back in random page order (as faults do).
  size_t spread=4*GIB, blk=2UL<<20; char*b=fresh(spread);
  for(size_t i=0;i<spread;i+=blk) if((i/blk)%4) madvise(b+i,blk,MADV_DONTNEED);
  sleep(10);
  char*h=mmap(0,GIB,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);madvise(h,GIB,MADV_NOHUGEPAGE);
  size_t pages=GIB/PG; double t0=now();
  for(size_t k=0;k<pages;k++){ size_t p=rnd()%pages; h[p*PG]=1; }
  for(size_t p=0;p<pages;p++) h[p*PG]=1;
  printf("refilled in %.2f s\n",now()-t0);
  munmap(b,spread);
  series("scattered, refilled",(void*)h);
  return 0;
}
