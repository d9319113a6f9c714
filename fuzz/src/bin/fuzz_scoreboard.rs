//! AFL++ entry point of the `scoreboard` target (see fuzz/README.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        lowtide_fuzz::scoreboard::run(data);
    });
}
