//! AFL++ entry point of the `wire` target (see fuzz/README.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        lowtide_fuzz::wire::run(data);
    });
}
