-- Revenue per country and month: an aggregate over a join.
select c.country, date_trunc('month', o.order_date) as month, count(*) as orders, sum(o.amount) as revenue,
       avg(o.amount) as average_order
from {{ ref('stg_orders') }} o
join {{ ref('stg_customers') }} c on o.customer_id = c.customer_id
group by c.country, date_trunc('month', o.order_date)
