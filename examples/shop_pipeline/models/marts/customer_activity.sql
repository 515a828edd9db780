-- Each customer's orders, first and last order day, customers without orders included: an aggregate
-- over an outer join, with MIN and MAX.
select c.customer_id, c.country, count(o.order_id) as orders, min(o.order_date) as first_order,
       max(o.order_date) as last_order
from {{ ref('stg_customers') }} c
left join {{ ref('stg_orders') }} o on o.customer_id = c.customer_id
group by c.customer_id, c.country
