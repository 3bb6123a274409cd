# Shared by the bench scripts (sourced, not run).

# Warns when cargo or rustc is running: a build beside a benchmark takes the CPU it measures.
warn_if_building() {
    local busy
    busy="$(pgrep -x -l 'cargo|rustc' || true)"
    if [ -n "$busy" ]; then
        echo "warning: builds are running; the numbers will not be representative:" >&2
        echo "$busy" >&2
    fi
}
