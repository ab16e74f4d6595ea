//! Counting of storage requests, so a benchmark can tell how many round trips a turn took.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// The AWS service an interceptor is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    S3,
    DynamoDb,
}

impl Service {
    fn label(self) -> &'static str {
        match self {
            Service::S3 => "S3",
            Service::DynamoDb => "DynamoDB",
        }
    }
}

/// Counts of HTTP attempts, per service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub s3: u64,
    pub dynamodb: u64,
}

impl CallCounts {
    pub fn total(&self) -> u64 {
        self.s3 + self.dynamodb
    }
}

impl Sub for CallCounts {
    type Output = CallCounts;

    /// The requests made between two snapshots.
    fn sub(self, earlier: CallCounts) -> CallCounts {
        CallCounts { s3: self.s3.saturating_sub(earlier.s3), dynamodb: self.dynamodb.saturating_sub(earlier.dynamodb) }
    }
}

#[derive(Default)]
struct Counts {
    s3: AtomicU64,
    dynamodb: AtomicU64,
    // Per-operation counts are only read by benchmarks, so a lock is cheap enough here.
    operations: Mutex<BTreeMap<String, u64>>,
}

/// Shared, cheaply clonable request counters. Every HTTP attempt is counted, so a request
/// the SDK retries counts once per attempt: that is the number of round trips actually paid.
#[derive(Clone, Default)]
pub struct CallCounter {
    counts: Arc<Counts>,
}

impl fmt::Debug for CallCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallCounter").field("counts", &self.snapshot()).finish()
    }
}

impl CallCounter {
    pub fn new() -> Self {
        Self::default()
    }

    /// The counts so far; subtract two snapshots to get the requests of one turn.
    pub fn snapshot(&self) -> CallCounts {
        CallCounts {
            s3: self.counts.s3.load(Ordering::Relaxed),
            dynamodb: self.counts.dynamodb.load(Ordering::Relaxed),
        }
    }

    pub fn s3(&self) -> u64 {
        self.counts.s3.load(Ordering::Relaxed)
    }

    pub fn dynamodb(&self) -> u64 {
        self.counts.dynamodb.load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        self.snapshot().total()
    }

    /// Attempts per operation, keyed like `DynamoDB.Query` or `S3.GetObject`.
    pub fn operations(&self) -> BTreeMap<String, u64> {
        self.counts.operations.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Sets every count back to zero.
    pub fn reset(&self) {
        self.counts.s3.store(0, Ordering::Relaxed);
        self.counts.dynamodb.store(0, Ordering::Relaxed);
        self.counts.operations.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
    }

    /// An interceptor that counts into this counter, for the client of `service`.
    pub fn interceptor(&self, service: Service) -> CountingInterceptor {
        CountingInterceptor { counter: self.clone(), service }
    }

    fn record(&self, service: Service, operation: Option<&str>) {
        let slot = match service {
            Service::S3 => &self.counts.s3,
            Service::DynamoDb => &self.counts.dynamodb,
        };
        slot.fetch_add(1, Ordering::Relaxed);
        let key = format!("{}.{}", service.label(), operation.unwrap_or("unknown"));
        *self.counts.operations.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entry(key).or_default() += 1;
    }
}

/// The SDK interceptor behind [`CallCounter`]; attach it with the client config's `interceptor`.
#[derive(Debug, Clone)]
pub struct CountingInterceptor {
    counter: CallCounter,
    service: Service,
}

impl Intercept for CountingInterceptor {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    // `read_before_transmit` runs once per attempt, just before the request goes on the wire. A
    // presigned request stops right after it and is never sent, so it is no round trip.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context.request().uri().contains("X-Amz-Signature=") {
            return Ok(());
        }
        let operation = cfg.load::<Metadata>().map(Metadata::name);
        self.counter.record(self.service, operation);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_subtract_and_reset() {
        let counter = CallCounter::new();
        let before = counter.snapshot();
        counter.record(Service::DynamoDb, Some("Query"));
        counter.record(Service::S3, Some("GetObject"));
        counter.record(Service::S3, Some("GetObject"));
        assert_eq!(counter.snapshot() - before, CallCounts { s3: 2, dynamodb: 1 });
        assert_eq!(counter.clone().total(), 3);
        assert_eq!(counter.operations().get("S3.GetObject"), Some(&2));
        counter.reset();
        assert_eq!(counter.snapshot(), CallCounts::default());
        assert!(counter.operations().is_empty());
    }
}
