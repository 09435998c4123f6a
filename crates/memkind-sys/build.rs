fn main() {
    // Debian's libmemkind-dev puts libmemkind.so in the default library search path.
    println!("cargo:rustc-link-lib=memkind");
    println!("cargo:rerun-if-changed=build.rs");
}
