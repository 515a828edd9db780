-- HAVING: customers with two orders or more. The view holds the groups that pass; a fast refresh
-- updates the customers it holds from their orders' changes and recomputes (from the masters, for
-- those customers only) the ones it does not hold, which may now pass.
select o.customer_id,
       count(*) as orders,
       max(o.order_date) as last_order_date
from {{ ref('orders') }} o
group by o.customer_id
having count(*) >= 2
