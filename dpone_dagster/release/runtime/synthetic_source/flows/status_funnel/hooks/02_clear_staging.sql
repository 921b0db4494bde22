-- Pre-hook 2 of 2 (after ensure_staging): every run stages the statuses afresh.
delete from flow_staging.order_statuses;
