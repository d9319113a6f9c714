//! AFL++ entry point of the `engine` target (see fuzz/README.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        lowtide_fuzz::engine::run(data);
    });
}
