-- Every order with its customer: a join view.
select o.order_id, o.order_date, o.status, o.amount, c.customer_id, c.name, c.country
from {{ ref('stg_orders') }} o
join {{ ref('stg_customers') }} c on o.customer_id = c.customer_id
