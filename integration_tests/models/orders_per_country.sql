-- Aggregate over an outer join: every customer country with its customers' orders; a country
-- whose customers have no order keeps its row (orders 0, first_order_date NULL).
select c.country,
       count(*) as customer_rows,
       count(o.order_id) as orders,
       min(o.order_date) as first_order_date
from {{ ref('customers') }} c
left join {{ ref('orders') }} o on o.customer_id = c.customer_id
group by c.country
