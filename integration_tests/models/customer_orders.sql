-- Inner-join view: every order with its customer (orders without a known customer drop out).
select o.order_id, o.order_date, o.status, c.customer_id, c.name as customer_name, c.country
from {{ ref('orders') }} o
join {{ ref('customers') }} c on o.customer_id = c.customer_id
