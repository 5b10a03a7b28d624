fn main() {
    std::process::exit(claude_sandbox::cli::main());
}
