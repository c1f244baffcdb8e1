import re,json,collections,sys
PID=int(sys.argv[1]); OFF=float(sys.argv[2])
rows={}
for l in open('logs/wake-up-fast-tierd-1/sleepy.stdout'):
    try: d=json.loads(l)
    except: continue
    if 't' in d: rows[int(d['unix'])]=(round(d['t']),d['ops_per_sec'],d['major_faults'])
recs=[]; cur=None
hdr=re.compile(r'^(\S.*?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$')
for l in open('ev.txt'):
    m=hdr.match(l)
    if m:
        cur=dict(comm=m.group(1),pid=int(m.group(2)),tid=int(m.group(3)),cpu=int(m.group(4)),t=float(m.group(5))+OFF,ev=m.group(6),tr=m.group(7),st=[])
        recs.append(cur)
    elif l.strip() and cur is not None:
        p=l.split()
        cur['st'].append(p[1] if len(p)>1 else '?')
# per unix second stats for sleepy
on=collections.Counter(); kern=collections.Counter(); ksym=collections.defaultdict(collections.Counter)
off=collections.defaultdict(lambda: collections.Counter()); offsym=collections.defaultdict(collections.Counter)
# cpu users per second: samples by comm
users=collections.defaultdict(collections.Counter)
out_at=None; out_state=None; out_st=None
for r in recs:
    s=int(r['t'])
    if r['ev']=='cpu-clock':
        users[s][r['comm'] if r['pid']!=PID else 'SLEEPY']+=1
        if r['pid']==PID:
            on[s]+=1
            if r['st'] and not r['st'][0].startswith('['):
                pass
            # kernel if any frame is a kernel frame at top
            top=r['st'][0] if r['st'] else '?'
            if any(x in ('asm_exc_page_fault','exc_page_fault','do_user_addr_fault','handle_mm_fault') for x in r['st']) or 'asm_' in top or top.startswith('_') or top in ('clear_page_erms',):
                kern[s]+=1; ksym[s][top]+=1
    elif r['ev']=='sched:sched_switch':
        m=re.search(r'prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)',r['tr'])
        pp,ps,np_=int(m.group(1)),m.group(2),int(m.group(3))
        if pp==PID:
            out_at=r['t']; out_state=ps
            key=next((f for f in r['st'] if f not in ('__schedule','schedule','schedule_timeout','io_schedule','preempt_schedule_common','__cond_resched','schedule_preempt_disabled','rwsem_down_read_slowpath','folio_wait_bit_common','__folio_lock_or_retry','irqentry_exit','asm_sysvec_apic_timer_interrupt','asm_sysvec_call_function','preempt_schedule_irq','io_schedule_timeout')),'?')
            out_st=key
        if np_==PID and out_at is not None:
            d=r['t']-out_at; off[int(out_at)][out_state]+=d; offsym[int(out_at)][(out_state,out_st)]+=d; out_at=None
def show(secs,label):
    n=len(secs)
    if not n: return
    agg_on=sum(on[s] for s in secs)/n; agg_k=sum(kern[s] for s in secs)/n
    offs=collections.Counter()
    for s in secs: offs.update(off[s])
    os_=collections.Counter()
    for s in secs: os_.update(offsym[s])
    ks=collections.Counter()
    for s in secs: ks.update(ksym[s])
    us=collections.Counter()
    for s in secs: us.update(users[s])
    print(f'== {label}: {n} s, ops {sum(rows[s][1] for s in secs)/n:.0f}, majors {sum(rows[s][2] for s in secs)/n:.0f}; on-cpu samples/s {agg_on:.0f} (kernel {agg_k:.0f})')
    print('  off-cpu s/s by state:', {k:round(v/n,3) for k,v in offs.items()})
    print('  off-cpu top:', [(k,round(v/n,3)) for k,v in os_.most_common(6)])
    print('  kernel top:', [(k,round(v/n,1)) for k,v in ks.most_common(6)])
    print('  cpu samples/s by comm:', [(k,round(v/n,1)) for k,v in us.most_common(8)])
start=min(s for s in rows if rows[s][0]>=128)
dips=[s for s in rows if s>=start and rows[s][2]>=50 and s+1 in rows]
after=[s+1 for s in dips if s+1 in rows]
quiet=[s for s in rows if s>=start and rows[s][2]==0]
# report second s covers [unix-1, unix): the line's unix stamp is the end of the window
def shift(l): return [s-1 for s in l]
show(shift(dips),'dip seconds'); show(shift(after),'second after'); show(shift(quiet),'quiet seconds')
