"""Builds `driver`: the peers script's one-thread gcc C kernels (its "gcc C" column, variant
c_vec1: `-O3 -march=native -ffast-math -fopenmp-simd`, glibc's vector math) with its timing loop
and input rotation, plus a mode that times one kernel at one size: `driver one K N` (K 1-7 as in
the peers script) prints `gcc KK n=N med_us=… p10=… nsets=…`. The C is generated from
`../shared/peers/peers.py` (or the path in PEERS_SCRIPT), so it stays the peers script's.

Usage: python3 benches/peers-one/build.py OUTDIR; `compare.sh` runs it beside `rfx bench`."""
import importlib.util
import os
import subprocess
import sys

out = sys.argv[1] if len(sys.argv) > 1 else 'target/peers-one'
script = os.environ.get('PEERS_SCRIPT', os.path.join(os.path.dirname(__file__), '..', '..', '..', 'shared', 'peers', 'peers.py'))
spec = importlib.util.spec_from_file_location('peers', script)
peers = importlib.util.module_from_spec(spec)
sys.argv = [script]
spec.loader.exec_module(peers)
os.makedirs(out, exist_ok=True)
kernels = {}
for prefix, pragma, reduction in (('vec', '#pragma omp simd', '#pragma omp simd reduction(+:acc)'), ('par', '', ''), ('sca', '', '')):
    src, _ = peers.kernel_src(prefix, pragma, reduction)
    kernels[prefix] = src.replace(f'void {prefix}_noop', f'void {prefix}_noop' if prefix == 'vec' else f'void {prefix}_noop_unused')
decls = '\n'.join(f'void {p}_{k}({peers.KARGS});' for p in ('vec', 'par', 'sca') for k in peers.KBODY) + '\nvoid vec_noop(void);\n'
bench = peers.CBENCH.replace('@DECLS@', decls)
one = r'''static void do_one(kfn* T,int ki,long n){
  int nin=NIN[ki]; int L=nsets_for(n,nin+1);
  float **A=malloc(L*sizeof(float*)),**B=malloc(L*sizeof(float*)),**C=malloc(L*sizeof(float*)),**O=malloc(L*sizeof(float*)); float S[16];
  for(int s=0;s<L;s++){ float* in[3]={0,0,0};
    for(int j=0;j<3;j++){ in[j]=falloc(n); if(j<nin) for(long i=0;i<n;i++) in[j][i]=rnd(); }
    A[s]=in[0]; B[s]=in[1]; C[s]=in[2]; O[s]=falloc(n); memset(O[s],0,n*4); }
  double med,p10,p90,mn; long Sn,Bt;
  bench(T[ki],L,O,A,B,C,S,n,budget_for(n),&med,&p10,&p90,&mn,&Sn,&Bt);
  printf("gcc %s n=%ld med_us=%.3f p10=%.3f nsets=%d\n",KN[ki],n,med/1e3,p10/1e3,L); fflush(stdout);
}
static void do_stream'''
bench = bench.replace('static void do_stream', one, 1)
bench = bench.replace('if(!strcmp(argv[1],"stream"))', 'if(!strcmp(argv[1],"one") && argc>3) do_one(TV,atoi(argv[2])-1,atol(argv[3]));\n  else if(!strcmp(argv[1],"stream"))', 1)
objs = []
for prefix, flags in (('vec', ['-O3', '-march=native', '-ffast-math', '-fopenmp-simd']), ('par', ['-O2']), ('sca', ['-O2'])):
    c = os.path.join(out, f'{prefix}.c')
    with open(c, 'w') as f:
        f.write(kernels[prefix])
    objs.append(os.path.join(out, f'{prefix}.o'))
    subprocess.run(['gcc', *flags, '-c', c, '-o', objs[-1]], check=True)
driver_c = os.path.join(out, 'driver.c')
with open(driver_c, 'w') as f:
    f.write(bench)
subprocess.run(['gcc', '-O2', '-fopenmp', driver_c, *objs, '-lm', '-o', os.path.join(out, 'driver')], check=True)
print(os.path.join(out, 'driver'))
