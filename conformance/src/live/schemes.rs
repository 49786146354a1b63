//! What every shipped scheme's conformance adapter shares, and the rangeline example scheme
//! under test. Each scheme crate builds its own [`SchemeUnderTest`] (its `conformance`
//! module, behind its `conformance` feature); a third-party plugin does the same.

use std::sync::Arc;
use std::time::Duration;

use super::example::{ExampleOriginFactory, ExampleScheme};
use super::SchemeUnderTest;

/// Per-request deadlines used by every shipped scheme under test: short enough that a trial
/// ends quickly, long enough for a 100 ms round trip.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The rangeline example scheme (`docs/plugin-guide.md`) against its origin.
pub fn example() -> SchemeUnderTest {
    SchemeUnderTest::new(
        Arc::new(ExampleScheme::new(TEST_TIMEOUT)),
        Arc::new(ExampleOriginFactory),
    )
}
