//! `doctor`'s devices check: which GPU device nodes this machine has, and whether a launch here
//! binds them (`[devices] gpu`). Says loudly when `gpu = true` finds none: a GPU program in the jail
//! would then fail for a reason the jail did not cause.

use super::{not_applicable, pass, warn, Check};
use crate::host::HostEnv;

const NAME: &str = "devices";

pub(super) fn check_devices(env: &HostEnv) -> Vec<Check> {
    let opts = crate::jail::launch::RunOptions {
        command: vec!["true".into()],
        ..Default::default()
    };
    let gpu = crate::jail::launch::plan_input(&opts, "doctor", env)
        .ok()
        .is_some_and(|(_, c)| c.devices.gpu);
    let root = crate::jail::devices::dev_root(env);
    let nodes: Vec<String> = crate::jail::devices::gpu_nodes(&root)
        .into_iter()
        .map(|(_, at)| at.display().to_string())
        .collect();
    vec![match (gpu, nodes.is_empty()) {
        (true, false) => pass(
            NAME,
            format!(
                "[devices] gpu = true: bound into the jail: {} (nothing else of /dev)",
                nodes.join(", ")
            ),
        ),
        (true, true) => warn(
            NAME,
            format!(
                "[devices] gpu = true, but no GPU device node is here ({}: no nvidia*, dri/card*, \
                 dri/renderD*, kfd): the jail gets none",
                root.display()
            ),
            "give the container the GPU (docker run --gpus all, or --device /dev/dri), then launch again",
        ),
        (false, false) => pass(
            NAME,
            format!(
                "GPU device nodes here, not in the jail: {} ([devices] gpu = true in \
                 ~/.config/claude-sandbox/config.toml binds them)",
                nodes.join(", ")
            ),
        ),
        (false, true) => not_applicable(NAME, "no GPU device nodes here, none asked for"),
    }]
}
