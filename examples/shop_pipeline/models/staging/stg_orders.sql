-- Orders without the test ones (an ephemeral model: a CTE in each mart, maintained with it).
{{ config(materialized='ephemeral') }}
select order_id, customer_id, status, amount, cast(ordered_at as date) as order_date
from {{ source('raw', 'orders') }}
where status <> 'test'
