//! Shared by the engine tests' in-memory schemes.

/// The part of an in-memory test scheme's `Scheme` impl that never varies: its name and URL
/// scheme (`$name`), and HTTP's capabilities. Use inside `impl Scheme for …`.
macro_rules! test_scheme_identity {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }

        fn url_schemes(&self) -> &[&'static str] {
            &[$name]
        }

        fn capabilities(&self) -> hydra_scheme::Capabilities {
            hydra_scheme::Capabilities::HTTP
        }
    };
}
