-- Aggregate over a join: shipped revenue per customer country.
select c.country,
       count(*) as line_count,
       sum(l.quantity * l.unit_price) as revenue,
       max(o.order_date) as last_order_date
from {{ ref('orders') }} o
join {{ ref('customers') }} c on o.customer_id = c.customer_id
join {{ ref('order_lines') }} l on l.order_id = o.order_id
where o.status = 'shipped'
group by c.country
