//! The seccomp filter bwrap installs on the jail's first process (and so on everything it starts).
//!
//! Guards against:
//! - terminal injection: TIOCSTI (push bytes into the terminal's input queue, which the human's shell
//!   reads after the agent exits: CVE-2017-5226) and TIOCLINUX (console paste). The jailed command
//!   keeps the human's terminal as its controlling tty, so job control, Ctrl-C, `/dev/tty` and
//!   SIGWINCH keep working for TUIs; only these two ioctls fail with EPERM. bwrap's `--new-session`
//!   would also stop TIOCSTI but breaks those TUIs.
//! - the kernel keyring: `keyctl`, `add_key` and `request_key` fail with EPERM. Keyrings are not
//!   namespaced: without this, the human's session keyring (inherited by bwrap) and the user
//!   keyring are the jail's too, and a key the human added outside is readable inside. Docker's
//!   default profile refuses the same three calls; devcontainers that run the jail have turned that
//!   profile off (`seccomp=unconfined`, docs/devcontainer.md).
//! - nested user namespaces (unless `allow_user_namespaces`): `unshare` and `clone` with
//!   `CLONE_NEWUSER` fail with EPERM, `clone3` with ENOSYS (its flags are behind a pointer a
//!   filter cannot read; libc then falls back to `clone`, as under Docker's profile). A nested
//!   namespace gives the jail's processes every capability over new namespaces: kernel attack
//!   surface (netfilter, mount, ...) the jail does not need.
//!
//! Numbers are compared on their low 32 bits, as the kernel does (a full 64-bit compare of the ioctl
//! request was bypassed with high bits set, CVE-2019-10063). Compat entry points (i386 and x32 on
//! `x86_64`, arm on aarch64) are covered; syscalls from any other architecture are refused outright
//! (fail closed).

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
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const CLONE_NEWUSER: u32 = 0x1000_0000;

// Offsets in `struct seccomp_data`: nr, arch, instruction_pointer, args[6].
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
// Low 32 bits of args[0] and args[1] on a little-endian machine.
const OFF_ARG0_LO: u32 = 16;
const OFF_ARG1_LO: u32 = 16 + 8;

/// One architecture's syscall numbers for what the filter looks at.
struct Arch {
    audit: u32,
    ioctl: &'static [u32],
    /// `add_key`, `request_key`, `keyctl`.
    keys: &'static [u32],
    /// `unshare` and `clone`: flags in the first argument.
    new_user: &'static [u32],
    clone3: &'static [u32],
}

/// x32 shares `x86_64`'s audit arch, its numbers with this bit set.
#[cfg(target_arch = "x86_64")]
const X32: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
const ARCHES: &[Arch] = &[
    Arch {
        audit: 0xC000_003E, // x86_64 and x32
        ioctl: &[16, X32 + 514],
        keys: &[248, 249, 250, X32 + 248, X32 + 249, X32 + 250],
        new_user: &[272, 56, X32 + 272, X32 + 56],
        clone3: &[435, X32 + 435],
    },
    Arch {
        audit: 0x4000_0003, // i386
        ioctl: &[54],
        keys: &[286, 287, 288],
        new_user: &[310, 120],
        clone3: &[435],
    },
];
#[cfg(target_arch = "aarch64")]
const ARCHES: &[Arch] = &[
    Arch {
        audit: 0xC000_00B7, // aarch64
        ioctl: &[29],
        keys: &[217, 218, 219],
        new_user: &[97, 220],
        clone3: &[435],
    },
    Arch {
        audit: 0x4000_0028, // arm (compat)
        ioctl: &[54],
        keys: &[309, 310, 311],
        new_user: &[337, 120],
        clone3: &[435],
    },
];

/// What the filter refuses beyond what it always refuses (the terminal ioctls, the keyring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Options {
    /// `allow_user_namespaces = true`: nested user namespaces are not refused.
    pub user_namespaces: bool,
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// Where a conditional jump goes when it is taken.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Ioctl,
    NewUser,
    Eperm,
    Enosys,
}

/// A conditional jump's offset: BPF has 8 bits for it, and the program is far shorter.
fn jump(over: usize) -> u8 {
    u8::try_from(over).expect("a seccomp jump fits in 8 bits")
}

/// The filter program. Layout: for each arch, `if arch == A` then compare the syscall number with that
/// arch's numbers (a match jumps to its check or its refusal, anything else is allowed); an unknown
/// arch gets EPERM for every syscall; then the checks: the ioctl's request, the `CLONE_NEWUSER` flag,
/// and the two refusals.
pub fn program(opts: Options) -> Vec<Insn> {
    let mut p = vec![insn(LD_W_ABS, 0, 0, OFF_ARCH)];
    let mut jumps: Vec<(usize, Target)> = Vec::new();
    for arch in ARCHES {
        let mut numbers: Vec<(u32, Target)> =
            arch.keys.iter().map(|n| (*n, Target::Eperm)).collect();
        if !opts.user_namespaces {
            numbers.extend(arch.clone3.iter().map(|n| (*n, Target::Enosys)));
            numbers.extend(arch.new_user.iter().map(|n| (*n, Target::NewUser)));
        }
        numbers.extend(arch.ioctl.iter().map(|n| (*n, Target::Ioctl)));
        // Block after the arch test: LD nr, one JEQ per number, RET ALLOW.
        let block_len = 1 + numbers.len() + 1;
        p.push(insn(JEQ_K, 0, jump(block_len), arch.audit));
        p.push(insn(LD_W_ABS, 0, 0, OFF_NR));
        for (nr, target) in numbers {
            jumps.push((p.len(), target));
            p.push(insn(JEQ_K, 0, 0, nr));
        }
        p.push(insn(RET_K, 0, 0, RET_ALLOW));
    }
    p.push(insn(RET_K, 0, 0, RET_ERRNO | EPERM)); // unknown architecture: fail closed
    let ioctl = p.len();
    p.push(insn(LD_W_ABS, 0, 0, OFF_ARG1_LO));
    p.push(insn(JEQ_K, 4, 0, TIOCSTI)); // to EPERM, below
    p.push(insn(JEQ_K, 3, 0, TIOCLINUX));
    p.push(insn(RET_K, 0, 0, RET_ALLOW));
    let new_user = p.len();
    p.push(insn(LD_W_ABS, 0, 0, OFF_ARG0_LO));
    p.push(insn(JSET_K, 0, 1, CLONE_NEWUSER)); // to EPERM, or over it to ALLOW
    let eperm = p.len();
    p.push(insn(RET_K, 0, 0, RET_ERRNO | EPERM));
    p.push(insn(RET_K, 0, 0, RET_ALLOW));
    let enosys = p.len();
    p.push(insn(RET_K, 0, 0, RET_ERRNO | ENOSYS));
    debug_assert_eq!(p[ioctl + 1].jt as usize, eperm - (ioctl + 1) - 1);
    debug_assert_eq!(p[ioctl + 2].jt as usize, eperm - (ioctl + 2) - 1);
    for (i, target) in jumps {
        let to = match target {
            Target::Ioctl => ioctl,
            Target::NewUser => new_user,
            Target::Eperm => eperm,
            Target::Enosys => enosys,
        };
        p[i].jt = jump(to - i - 1);
    }
    p
}

/// The program as the bytes bwrap's `--seccomp FD` reads (`struct sock_filter[]`, native endian).
pub fn program_bytes(opts: Options) -> Vec<u8> {
    let mut out = Vec::new();
    for i in program(opts) {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// Run the program on one `seccomp_data` (for tests): returns the action.
#[cfg(test)]
pub fn evaluate(opts: Options, arch: u32, nr: u32, args: [u64; 2]) -> u32 {
    let prog = program(opts);
    let load = |off: u32| -> u32 {
        match off {
            OFF_NR => nr,
            OFF_ARCH => arch,
            OFF_ARG0_LO => u32::try_from(args[0] & 0xffff_ffff).unwrap(),
            OFF_ARG1_LO => u32::try_from(args[1] & 0xffff_ffff).unwrap(),
            _ => 0,
        }
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let i = prog[pc];
        let taken = match i.code {
            LD_W_ABS => {
                acc = load(i.k);
                None
            }
            JEQ_K => Some(acc == i.k),
            JSET_K => Some(acc & i.k != 0),
            RET_K => return i.k,
            _ => unreachable!("instruction outside the program's vocabulary"),
        };
        if let Some(t) = taken {
            pc += if t { i.jt as usize } else { i.jf as usize };
        }
        pc += 1;
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    const DENY: u32 = RET_ERRNO | EPERM;
    const JAILED: Options = Options {
        user_namespaces: false,
    };
    const X86: u32 = 0xC000_003E;
    const I386: u32 = 0x4000_0003;

    #[test]
    fn blocks_tiocsti_and_tioclinux_on_every_entry_point() {
        for opts in [
            JAILED,
            Options {
                user_namespaces: true,
            },
        ] {
            for (arch, nr) in [(X86, 16), (X86, X32 + 514), (I386, 54)] {
                let ev = |req: u64| evaluate(opts, arch, nr, [0, req]);
                assert_eq!(ev(u64::from(TIOCSTI)), DENY);
                assert_eq!(ev(u64::from(TIOCLINUX)), DENY);
                // High bits do not hide the request (CVE-2019-10063).
                assert_eq!(ev(0xffff_ffff_0000_0000 | u64::from(TIOCSTI)), DENY);
                // Other ioctls (TIOCGWINSZ) still work.
                assert_eq!(ev(0x5413), RET_ALLOW);
            }
        }
    }

    #[test]
    fn the_keyring_is_refused_on_every_entry_point() {
        for opts in [
            JAILED,
            Options {
                user_namespaces: true,
            },
        ] {
            for (arch, nr) in [
                (X86, 248),
                (X86, 249),
                (X86, 250),
                (X86, X32 + 250),
                (I386, 286),
                (I386, 288),
            ] {
                assert_eq!(evaluate(opts, arch, nr, [0, 0]), DENY, "{arch:x} {nr}");
            }
        }
    }

    #[test]
    fn nested_user_namespaces_are_refused_unless_allowed() {
        const NEWNS: u64 = 0x0002_0000;
        let user = u64::from(CLONE_NEWUSER);
        for (arch, unshare, clone) in [(X86, 272, 56), (X86, X32 + 272, X32 + 56), (I386, 310, 120)]
        {
            for nr in [unshare, clone] {
                assert_eq!(evaluate(JAILED, arch, nr, [user | NEWNS, 0]), DENY);
                // High bits do not hide the flag; other namespaces and plain forks pass.
                assert_eq!(evaluate(JAILED, arch, nr, [user | (1 << 40), 0]), DENY);
                assert_eq!(evaluate(JAILED, arch, nr, [NEWNS, 0]), RET_ALLOW);
                assert_eq!(evaluate(JAILED, arch, nr, [0x11, 0]), RET_ALLOW);
                let open = Options {
                    user_namespaces: true,
                };
                assert_eq!(evaluate(open, arch, nr, [user, 0]), RET_ALLOW);
            }
        }
        assert_eq!(evaluate(JAILED, X86, 435, [0, 0]), RET_ERRNO | ENOSYS);
        assert_eq!(evaluate(JAILED, I386, 435, [0, 0]), RET_ERRNO | ENOSYS);
        let open = Options {
            user_namespaces: true,
        };
        assert_eq!(evaluate(open, X86, 435, [0, 0]), RET_ALLOW);
    }

    #[test]
    fn other_syscalls_pass_and_unknown_arches_fail_closed() {
        assert_eq!(evaluate(JAILED, X86, 0, [0, u64::from(TIOCSTI)]), RET_ALLOW); // read()
        assert_eq!(evaluate(JAILED, I386, 3, [0, 0]), RET_ALLOW);
        assert_eq!(
            evaluate(JAILED, 0xC000_00B7, 29, [0, u64::from(TIOCSTI)]),
            DENY
        );
        assert_eq!(program_bytes(JAILED).len(), program(JAILED).len() * 8);
    }
}
