-- Inner-join view: every order with its customer (orders without a known customer drop out).
-- mv_log=true: each refresh appends the rows it changed to the view's change log
-- (mlog_customer_orders), which orders_by_country_status reads: no capture of this view's history.
{{ config(mv_log=true) }}
select o.order_id, o.order_date, o.status, c.customer_id, c.name as customer_name, c.country
from {{ ref('orders') }} o
join {{ ref('customers') }} c on o.customer_id = c.customer_id
