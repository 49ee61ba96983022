//! The behaviour suite of the store: every case runs against [`MemoryStore`], against
//! [`RedisStore`] on a private `redis-server` per case, and (one test per topology, the cases in
//! turn, each under its own key prefix) on a Redis Cluster of 3 primaries and 3 replicas and on a
//! Sentinel group of 3 over a primary and a replica. All must pass unchanged.
//!
//! [`MemoryStore`]: switchboard_store::MemoryStore
//! [`RedisStore`]: switchboard_store::RedisStore

mod again;
mod bus;
mod bus_gaps;
mod caps;
mod eviction;
mod expiry;
mod failover;
mod frozen_link;
mod graceful_sentinel;
mod harness;
mod rates;
mod redis_only;
mod resent;
mod sessions;
mod slots_under_load;
mod streams;
mod tasks;
mod tls;

/// Generates `memory::<module>::<case>` and `redis::<module>::<case>` tests from the case
/// functions `crate::<module>::<case>(Kind)`, and `on_cluster::every_case` and
/// `on_sentinel::every_case`, which run them all on one shared topology.
macro_rules! both_backends {
    ($($module:ident: [$($case:ident),* $(,)?]),* $(,)?) => {
        mod memory {
            $(mod $module {
                $(#[tokio::test]
                async fn $case() {
                    crate::$module::$case(crate::harness::Kind::Memory).await
                })*
            })*
        }
        mod redis {
            $(mod $module {
                $(#[tokio::test]
                async fn $case() {
                    crate::$module::$case(crate::harness::Kind::Redis).await
                })*
            })*
        }
        mod on_cluster {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case() {
                crate::suite_on(crate::harness::Kind::Cluster, &[
                    $($((concat!(stringify!($module), "::", stringify!($case)),
                        |k| Box::pin(crate::$module::$case(k))),)*)*
                ]).await
            }
        }
        mod on_sentinel {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_case() {
                crate::suite_on(crate::harness::Kind::Sentinel, &[
                    $($((concat!(stringify!($module), "::", stringify!($case)),
                        |k| Box::pin(crate::$module::$case(k))),)*)*
                ]).await
            }
        }
    };
}

both_backends! {
    again: [
        a_creation_sent_again_creates_one_session,
        a_registration_sent_again_is_admitted_once,
        an_upstream_swap_sent_again_is_swapped,
    ],
    rates: [
        a_burst_passes_then_the_limit_refuses_on_every_node,
        rates_are_taken_without_a_session,
        a_refused_request_moves_no_limit,
        other_refusals_come_first,
        begin_rated_registers_only_what_its_limits_let_through,
    ],
    sessions: [
        create_then_begin_returns_the_record,
        begin_on_an_unknown_session_is_missing,
        duplicate_request_ids_are_refused_and_register_nothing,
        finish_as_json_forgets_the_stream,
        finish_after_streaming_keeps_the_log,
        updates_change_the_record,
        begin_update_loads_and_updates_for_the_own_principal_only,
        upstream_sessions_swap_only_when_as_expected,
        the_session_cap_is_exact,
        delete_removes_every_key_and_tells_every_node,
        liveness_follows_heartbeats,
        a_node_subscribes_once,
        in_flight_requests_per_session_are_capped,
        in_flight_entries_are_listed_and_forgotten_only_as_listed,
        check_admits_without_registering_until_register,
        register_on_a_missing_session_writes_nothing,
        check_counts_registered_requests_and_late_duplicates_keep_the_first,
        a_reloaded_record_reflects_changes_made_elsewhere,
        the_first_proposed_secret_is_agreed_by_every_node,
    ],
    streams: [
        appended_events_replay_in_order,
        the_standalone_stream_is_always_known,
        unknown_streams_stay_unknown,
        trimming_is_exact_and_detected,
        the_final_event_ends_the_request,
        claim_and_release,
        events_reach_the_holders_node,
        an_append_id_stores_its_event_once,
        standalone_events_always_go_through_the_inbox,
        takeover_reaches_the_previous_holders_node,
        abort_running_finishes_a_dead_nodes_request,
        abort_running_of_a_standalone_answered_request_goes_to_the_standalone_stream,
        a_gone_session_takes_no_writes,
        replay_pages_through_a_long_log,
    ],
    bus: [
        replies_reach_the_waiting_node,
        cancellations_reach_the_running_node,
        a_full_inbox_holds_messages_back_without_losing_them,
        owners_are_claimed_by_compare_and_set,
        owners_of_many_sessions_are_read_at_once,
        messages_reach_the_named_node,
        broadcasts_reach_every_node,
    ],
    expiry: [
        idle_sessions_expire_and_are_reaped,
        activity_keeps_a_session_alive,
        checked_requests_keep_a_session_alive,
        finish_restarts_the_idle_clock,
        reaping_a_thousand_sessions_takes_a_few_passes,
        reaping_respects_the_limit,
        logs_expire_after_their_last_event,
        the_stream_registry_is_pruned,
    ],
    caps: [
        a_stream_keeps_at_most_max_stream_log_bytes,
        a_session_keeps_at_most_max_session_log_bytes,
        an_event_over_max_event_bytes_is_delivered_whole_and_kept_as_a_stand_in,
        large_events_are_kept_and_delivered_whole,
        sessions_per_principal_are_capped,
    ],
    tasks: [
        tasks_are_shared_and_terminal_states_are_final,
        tasks_expire_after_their_ttl,
        expired_tasks_leave_tombstones_and_slots_cap_a_principal,
    ],
    eviction: [the_memory_policy_is_read],
}

/// One case of the suite: its name and how to run it on a backend.
type Case = (
    &'static str,
    fn(harness::Kind) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
);

/// Runs every case in turn on one shared topology of `kind`, naming each as it starts (so a
/// failure says which).
async fn suite_on(kind: harness::Kind, cases: &[Case]) {
    use switchboard_tests::redis_process::*;
    let tools = [
        ("redis-server", redis_server_binary().is_some()),
        ("redis-cli", redis_cli_binary().is_some()),
        ("redis-sentinel", redis_sentinel_binary().is_some()),
    ];
    if !switchboard_tests::peers::available_or_skip(&format!("{kind:?} suite"), &tools) {
        return;
    }
    let _shared = harness::Shared::start(kind);
    for (name, case) in cases {
        eprintln!("{kind:?}: {name}");
        case(kind).await;
    }
}
