-- A view over a view: customer_orders (itself a fast_refresh model) is this view's master. Its
-- change log (change_logs.yml) is written by customer_orders' own refresh (mv_log=true); dbt
-- refreshes customer_orders first (it is a ref), then this view from what that refresh changed.
select country, status, count(*) as orders
from {{ ref('customer_orders') }}
group by country, status
