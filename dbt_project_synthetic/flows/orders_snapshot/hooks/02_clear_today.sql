-- Pre-hook 2 of 2 (after ensure_staging): re-running a day replaces that day's snapshot.
delete from flow_staging.orders_snapshot where snapshot_day = current_date;
