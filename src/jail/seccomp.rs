//! The seccomp filter that stops terminal injection from inside the jail.
//!
//! Guards against TIOCSTI (push bytes into the terminal's input queue, which the human's shell reads
//! after the agent exits: CVE-2017-5226) and TIOCLINUX (console paste). The jailed command keeps the
//! human's terminal as its controlling tty, so job control, Ctrl-C, `/dev/tty` and SIGWINCH keep
//! working for TUIs; only these two ioctls fail with EPERM. bwrap's `--new-session` would also stop
//! TIOCSTI but breaks those TUIs.
//!
//! The request number is compared on its low 32 bits only, as the kernel does (a full 64-bit compare was
//! bypassed with high bits set, CVE-2019-10063). Compat entry points (i386 and x32 on `x86_64`, arm on
//! aarch64) are covered; syscalls from any other architecture are refused outright (fail closed).

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

// Offsets in `struct seccomp_data`: nr, arch, instruction_pointer, args[6].
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
// Low 32 bits of args[1] on a little-endian machine.
const OFF_ARG1_LO: u32 = 16 + 8;

/// (audit arch, ioctl syscall numbers on that arch).
#[cfg(target_arch = "x86_64")]
const ARCHES: &[(u32, &[u32])] = &[
    (0xC000_003E, &[16, 0x4000_0000 + 514]), // x86_64 and x32 (compat ioctl)
    (0x4000_0003, &[54]),                    // i386
];
#[cfg(target_arch = "aarch64")]
const ARCHES: &[(u32, &[u32])] = &[
    (0xC000_00B7, &[29]), // aarch64
    (0x4000_0028, &[54]), // arm (compat)
];

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// The filter program. Layout: for each arch, `if arch == A` then compare the syscall number with that
/// arch's ioctl numbers (a match jumps to the request check, anything else is allowed); an unknown arch
/// gets EPERM for every syscall; the request check denies TIOCSTI and TIOCLINUX.
/// A conditional jump's offset: BPF has 8 bits for it, and the program is far shorter.
fn jump(over: usize) -> u8 {
    u8::try_from(over).expect("a seccomp jump fits in 8 bits")
}

pub fn program() -> Vec<Insn> {
    let mut p = vec![insn(LD_W_ABS, 0, 0, OFF_ARCH)];
    let mut ioctl_jumps = Vec::new();
    for (arch, nrs) in ARCHES {
        // Block after the arch test: LD nr, one JEQ per number, RET ALLOW.
        let block_len = 1 + nrs.len() + 1;
        p.push(insn(JEQ_K, 0, jump(block_len), *arch));
        p.push(insn(LD_W_ABS, 0, 0, OFF_NR));
        for nr in *nrs {
            ioctl_jumps.push(p.len());
            p.push(insn(JEQ_K, 0, 0, *nr));
        }
        p.push(insn(RET_K, 0, 0, RET_ALLOW));
    }
    p.push(insn(RET_K, 0, 0, RET_ERRNO | EPERM)); // unknown architecture: fail closed
    let check = p.len();
    for i in ioctl_jumps {
        p[i].jt = jump(check - i - 1);
    }
    p.push(insn(LD_W_ABS, 0, 0, OFF_ARG1_LO));
    p.push(insn(JEQ_K, 2, 0, TIOCSTI));
    p.push(insn(JEQ_K, 1, 0, TIOCLINUX));
    p.push(insn(RET_K, 0, 0, RET_ALLOW));
    p.push(insn(RET_K, 0, 0, RET_ERRNO | EPERM));
    p
}

/// The program as the bytes bwrap's `--seccomp FD` reads (`struct sock_filter[]`, native endian).
pub fn program_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for i in program() {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// Run the program on one `seccomp_data` (for tests): returns the action.
#[cfg(test)]
pub fn evaluate(arch: u32, nr: u32, arg1: u64) -> u32 {
    let prog = program();
    let load = |off: u32| -> u32 {
        match off {
            OFF_NR => nr,
            OFF_ARCH => arch,
            OFF_ARG1_LO => u32::try_from(arg1 & 0xffff_ffff).unwrap(),
            _ => 0,
        }
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let i = prog[pc];
        match i.code {
            LD_W_ABS => acc = load(i.k),
            JEQ_K => {
                pc += if acc == i.k {
                    i.jt as usize
                } else {
                    i.jf as usize
                };
            }
            RET_K => return i.k,
            _ => unreachable!("instruction outside the program's vocabulary"),
        }
        pc += 1;
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn blocks_tiocsti_and_tioclinux_on_every_entry_point() {
        for (arch, nr) in [
            (0xC000_003E, 16),
            (0xC000_003E, 0x4000_0000 + 514),
            (0x4000_0003, 54),
        ] {
            assert_eq!(evaluate(arch, nr, u64::from(TIOCSTI)), RET_ERRNO | EPERM);
            assert_eq!(evaluate(arch, nr, u64::from(TIOCLINUX)), RET_ERRNO | EPERM);
            // High bits do not hide the request (CVE-2019-10063).
            assert_eq!(
                evaluate(arch, nr, 0xffff_ffff_0000_0000 | u64::from(TIOCSTI)),
                RET_ERRNO | EPERM
            );
            // Other ioctls (TIOCGWINSZ) still work.
            assert_eq!(evaluate(arch, nr, 0x5413), RET_ALLOW);
        }
    }

    #[test]
    fn other_syscalls_pass_and_unknown_arches_fail_closed() {
        assert_eq!(evaluate(0xC000_003E, 0, u64::from(TIOCSTI)), RET_ALLOW); // read()
        assert_eq!(evaluate(0x4000_0003, 3, 0), RET_ALLOW);
        assert_eq!(
            evaluate(0xC000_00B7, 29, u64::from(TIOCSTI)),
            RET_ERRNO | EPERM
        );
        assert_eq!(program_bytes().len(), program().len() * 8);
    }
}
